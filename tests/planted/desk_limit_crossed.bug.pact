# PLANTED BUG: a desk limit crossed by two agreements on the same day.
# The desk promises two refunds a day within its limit of 500.00 EUR
# (`limit desk_daily`), but each refund may be up to 300.00: two agreements
# refunded on the same UTC day carry up to 600.00 together, so the runtime
# refuses the second one (PW528) where the desk meant it to pass.
# A reviewer should see (with `--agreements 2`): refund and dispatch in one
# agreement, refund and dispatch in the other, 500.02 EUR in one window;
# `limit:desk_daily` fails. Fix: cap each refund at 250.00.
pact "planted.desk_limit_crossed" version "1.0.0"

currency EUR scale 2
default deny

role agent

param amount: money between 0.01 and 300.00
param order_id: text matching "ORD-[0-9]{1,6}"

account merchant "merchant:refunds" external
account customer "customers:{order_id}:card"

rule R3 allow

effect refund_payment {
  risk R3
  reversibility irreversible
  egress POST "https://api.payments.example.com/refunds"
  strategy idempotent
  key order_id, amount
  amount amount
}

limit desk_daily: total(refund_payment) <= 500.00 per 1d

state requested initial
state refunded final

clause "1" transition refund: requested -> refunded {
  by agent
  call refund_payment
  transfer amount from merchant to customer
}

clause "2" invariant credited_once: reached(refunded) implies balance(customer) == amount
