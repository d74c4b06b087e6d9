# Reference policy: a shop pays out an order's price once it ships, and a
# support agent may then give part of it back. New in 1.1, the partial
# refund is bounded by the agreement's own price (`between 0.01 and price`),
# so whatever the price, no refund gives back more than the customer paid;
# the verifier proves it for every pair of values, not for samples.
pact "shop.partial_refund" version "1.0.0"

currency EUR scale 2

role customer
role shop_agent
role support_agent

param price: money between 1.00 and 500.00
param partial: money between 0.01 and price    # at most what was paid

account card   "customers:{customer}:card" external
account escrow "orders:{agreement}"
account shop   "merchant:payouts" external

state ordered initial
state paid
state shipped
state partly_refunded final
state refunded final
state closed final

clause "1" transition pay: ordered -> paid {
  by customer
  transfer price from card to escrow
}

clause "2" transition ship: paid -> shipped {
  by shop_agent
  transfer price from escrow to shop
}

clause "3.1" transition refund_part: shipped -> partly_refunded {
  by support_agent
  when partial < price
  transfer partial from shop to card
}

clause "3.2" transition refund_all: shipped -> refunded {
  by support_agent
  transfer price from shop to card
}

clause "3.3" transition close: shipped -> closed {
  by shop_agent
}

clause "4" invariant never_refund_above_price: balance(card) <= 0
clause "5" invariant part_is_less_than_all: reached(partly_refunded) implies balance(card) < 0
clause "6" invariant escrow_empty_when_final: final implies balance(escrow) == 0
