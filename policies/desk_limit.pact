# A refund desk with a daily limit across all its agreements (new in 1.1): each
# refund is at most 300.00 EUR, and the desk pays out at most 600.00 EUR per UTC
# day over every agreement of the pact. The runtime refuses the refund that
# would cross it (PW528); `pactwright verify --agreements 2` checks that two
# refunds on the same day stay within it.
pact "example.desk_limit" version "1.1.0"

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

limit desk_daily: total(refund_payment) <= 600.00 per 1d

state requested initial
state refunded final

clause "1" transition refund: requested -> refunded {
  by agent
  call refund_payment
  transfer amount from merchant to customer
}

clause "2" invariant credited_once: reached(refunded) implies balance(customer) == amount
