# support_refund where `issue` also calls notify_customer after the refund, and the refund declares
# `compensate with void_payment`: when the later call fails for good, the refund is voided. Used by
# policies/scenarios/.
# Reference policy: a support assistant assesses a refund; a human approver
# authorises it; the payment provider issues it. The refund is irreversible,
# its amount is model-influenced, and the provider's API can time out.
pact "support.refund" version "2.1.0-compensate"

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
  max_calls 1
  timeout 1s
  ceiling 500.00
  strategy compensate with void_payment   # a later failure voids the refund
  key order_id, amount                   # protected fields: change one and it is a new action
  amount amount                          # what one refund carries: the agreed amount
  consequence "{amount} will be returned to the customer's card for order {order_id}."
}

effect void_payment {
  risk R4
  reversibility irreversible
  scopes "payments:refund"
  egress POST "https://api.payments.example.com/voids"
  max_calls 1
  timeout 1s
  strategy idempotent
  key order_id, amount
}

effect notify_customer {
  risk R2
  reversibility not_applicable
  scopes "notify:send"
  egress POST "https://notify.example.com"
  max_calls 1
  timeout 5s
  strategy once
}

state requested initial
state assessed
state refunded final
state declined final

clause "1" transition assess: requested -> assessed {
  by assistant
  call read_order
}

clause "2" transition issue: assessed -> refunded {
  by support_agent
  approval by refund_approver not requester
  call refund_payment
  call notify_customer
  transfer amount from merchant to customer
}

clause "3" transition decline: requested, assessed -> declined {
  by support_agent, refund_approver
}

clause "4.1" invariant refund_at_most_once: applied(refund_payment) <= 1
clause "4.2" invariant refund_within_ceiling: total(refund_payment) <= 500.00
clause "4.3" invariant refund_only_when_approved: applied(refund_payment) > 0 implies approved(issue)
