# Four eyes: a large refund is issued only after two approvals from two
# different parties, neither of them the agent who asked for it.
pact "support.four_eyes_refund" version "1.0.0"

currency EUR scale 2
default deny

role support_agent
role refund_approver
role risk_officer

param amount: money between 0.01 and 5000.00
param order_id: text matching "ORD-[0-9]{1,12}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"

rule R4 require_approval

effect refund_payment {
  risk R4
  reversibility irreversible
  scopes "payments:refund"
  egress POST "https://api.payments.example.com"
  max_calls 1
  timeout 15s
  ceiling 5000.00
  strategy reconcilable
  key order_id, amount
  amount amount
  consequence "{amount} will be returned to the customer's card for order {order_id}."
}

state requested initial
state refunded final
state declined final

clause "1" transition issue: requested -> refunded {
  by support_agent
  approval by refund_approver, risk_officer distinct not requester
  call refund_payment
  transfer amount from merchant to customer
}

clause "2" transition decline: requested -> declined {
  by support_agent, refund_approver, risk_officer
}

clause "3.1" invariant refund_at_most_once: applied(refund_payment) <= 1
clause "3.2" invariant four_eyes: applied(refund_payment) > 0 implies approvals(issue) >= 2
