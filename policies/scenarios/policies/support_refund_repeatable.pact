# support_refund where `issue` may fire twice (`fired(issue) < 2`, max_calls 3) and `close` ends the
# agreement: a second refund depends on the first one's outcome. Used by policies/scenarios/.
# Reference policy: a support assistant assesses a refund; a human approver
# authorises it; the payment provider issues it. The refund is irreversible,
# its amount is model-influenced, and the provider's API can time out.
pact "support.refund" version "2.1.0-repeatable"

currency EUR scale 2
default deny                             # a risk class with no rule is denied

role support_agent
role refund_approver
role assistant untrusted                 # may propose; never authorises

param amount: money between 0.01 and 500.00    # desk limit: above it nothing proceeds
param order_id: text matching "ORD-[0-9]{1,12}"
param reason: one of damaged_on_arrival, not_received, wrong_item

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"

budget {
  max_turns 8
  max_model_calls 8
  max_tool_calls 6
  max_active_time 60s
  ceiling 500.00
}

rule R1 allow_with_grant                 # read the order
rule R2 allow_with_grant                 # annotate the ticket
rule R4 require_approval                 # issue the refund

effect read_order {
  risk R1
  reversibility not_applicable
  scopes "orders:read"
  egress GET "https://orders.internal.example.com"
  max_calls 3
  timeout 4s
  strategy retry                         # it changes nothing, so repeating it is safe
}

effect refund_payment {
  risk R4
  reversibility irreversible
  scopes "payments:refund"
  egress POST "https://api.payments.example.com"
  max_calls 3
  timeout 1s
  ceiling 500.00
  strategy reconcilable                  # the provider can be asked by idempotency key
  key order_id, amount                   # protected fields: change one and it is a new action
  amount amount                          # what one refund carries: the agreed amount
  consequence "{amount} will be returned to the customer's card for order {order_id}."
}

state requested initial
state assessed
state refunded final
state declined final

clause "1" transition assess: requested -> assessed {
  by assistant
  call read_order
}

clause "2" transition issue: assessed -> assessed {
  by support_agent
  when fired(issue) < 2
  approval by refund_approver not requester
  call refund_payment
  transfer amount from merchant to customer
}

clause "2.1" transition close: assessed -> refunded {
  by support_agent
}

clause "3" transition decline: requested, assessed -> declined {
  by support_agent, refund_approver
}

clause "4.3" invariant refund_only_when_approved: applied(refund_payment) > 0 implies approved(issue)
