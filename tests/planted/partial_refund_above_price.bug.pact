# PLANTED BUG: a partial refund bounded by a literal, not by the price.
# The shop pays out an order's price once it ships; a support agent may then
# refund part of it. `partial` may be anything up to 500.00, the most any
# order costs, and nothing ties it to this order's price: for an order of
# 1.00 the "partial" refund can give the customer 1.01 back, more than was
# paid (the shop's payouts account is external, so no balance refuses it).
# A reviewer should see: pay, ship, refund_part with partial > price;
# `never_refund_above_price` fails. Fix: `between 0.00 and price`.
pact "planted.partial_refund_above_price" version "1.0.0"

currency EUR scale 2

role customer
role shop_agent
role support_agent

param price: money between 1.00 and 500.00
param partial: money between 0.00 and 500.00

account card   "customers:{customer}:card" external
account escrow "orders:{agreement}"
account shop   "merchant:payouts" external

state ordered initial
state paid
state shipped
state partly_refunded final
state closed final

clause "1" transition pay: ordered -> paid {
  by customer
  transfer price from card to escrow
}

clause "2" transition ship: paid -> shipped {
  by shop_agent
  transfer price from escrow to shop
}

clause "3" transition refund_part: shipped -> partly_refunded {
  by support_agent
  transfer partial from shop to card
}

clause "4" transition close: shipped -> closed {
  by shop_agent
}

clause "5" invariant never_refund_above_price: balance(card) <= 0
