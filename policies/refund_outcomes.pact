# A refund sent to a payment provider, then closed from what the provider answered:
# confirmed once the refund is acknowledged (or found at the provider by
# reconciliation), written off once an operator abandons it as "may have occurred".
pact "example.refund_outcomes" version "1.1.0"

currency EUR scale 2
default deny

role agent
role ops

param amount: money between 0.01 and 200.00
param order_id: text matching "ORD-[0-9]{1,6}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"

rule R3 allow

effect refund_payment {
  risk R3
  reversibility irreversible
  egress POST "https://api.payments.example.com/refunds"
  timeout 15s
  strategy reconcilable
  key order_id, amount
  amount amount
}

state requested initial
state dispatched
state confirmed final
state written_off final

clause "1" transition refund: requested -> dispatched {
  by agent
  call refund_payment
}

clause "2" transition confirm: dispatched -> confirmed {
  by agent
  when acknowledged(refund_payment) or reconciled(refund_payment)
  transfer amount from merchant to customer
}

clause "3" transition close_after_abandon: dispatched -> written_off {
  by ops
  when abandoned(refund_payment)
}

clause "4.1" invariant confirmed_only_when_refunded: reached(confirmed) implies applied(refund_payment) >= 1
clause "4.2" invariant credited_once_confirmed: reached(confirmed) implies balance(customer) == amount
clause "4.3" invariant credited_only_when_confirmed: balance(customer) > 0 implies reached(confirmed)
clause "4.4" invariant written_off_only_after_abandon: reached(written_off) implies abandoned(refund_payment)
