# PLANTED BUG: a refund confirmed before the provider acknowledged it.
# `confirm` credits the customer once the refund is settled with the payment
# provider. Its guard was written as "not abandoned" ("the refund went out
# unless an operator gave it up"), so `confirm` may commit while the refund
# is still prepared, before the worker sent it. A reviewer should see:
# refund, confirm; `confirmed_only_when_refunded` violated (confirmed, the
# refund applied 0 times).
# Fix: `when acknowledged(refund_payment) or reconciled(refund_payment)`.
pact "planted.confirm_before_acknowledged" version "1.0.0"

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
  when not abandoned(refund_payment)
  transfer amount from merchant to customer
}

transition close_after_abandon: dispatched -> written_off {
  by ops
  when abandoned(refund_payment)
}

invariant confirmed_only_when_refunded: reached(confirmed) implies applied(refund_payment) >= 1
