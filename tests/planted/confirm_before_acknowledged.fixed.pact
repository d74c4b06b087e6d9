# FIXED twin of confirm_before_acknowledged.bug.pact: `confirm` waits until
# the provider acknowledged the refund, or reconciliation found it at the
# provider; an abandoned refund is written off instead.
pact "planted.confirm_before_acknowledged" version "1.0.1"

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
  strategy reconcilable
  key order_id, amount
  amount amount
}

state requested initial
state dispatched
state confirmed final
state written_off final

transition refund: requested -> dispatched {
  by agent
  call refund_payment
}

transition confirm: dispatched -> confirmed {
  by agent
  when acknowledged(refund_payment) or reconciled(refund_payment)
  transfer amount from merchant to customer
}

transition close_after_abandon: dispatched -> written_off {
  by ops
  when abandoned(refund_payment)
}

invariant confirmed_only_when_refunded: reached(confirmed) implies applied(refund_payment) >= 1
