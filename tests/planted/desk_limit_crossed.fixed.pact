# FIXED twin of desk_limit_crossed.bug.pact: each refund is at most 250.00,
# so two refunds on the same day fit within the 500.00 desk limit.
pact "planted.desk_limit_crossed" version "1.0.0"

currency EUR scale 2
default deny

role agent

param amount: money between 0.01 and 250.00
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
