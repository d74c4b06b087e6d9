# FIXED twin of partial_refund_above_price.bug.pact: the partial refund is
# bounded by the order's own price (new in 1.1), so the customer never gets
# back more than was paid, for every price and every refund the bounds allow.
pact "planted.partial_refund_above_price" version "1.0.1"

currency EUR scale 2

role customer
role shop_agent
role support_agent

param price: money between 1.00 and 500.00
param partial: money between 0.00 and price

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
