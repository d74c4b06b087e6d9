# PLANTED BUG: money stranded in escrow at a final state.
# A return refunds the price minus a restocking fee, but the fee itself is
# never routed anywhere: it stays in the order's escrow forever after the
# agreement is closed. A reviewer should see: pay, return_item at price 5.00
# (refund 3.00); `escrow_empty_when_final` violated with escrow 2.00.
# Fix: split the price: `restocking to merchant`, `remaining to customer`.
pact "planted.stranded_restocking_fee" version "1.0.0"

currency GBP scale 2

role customer
role clerk

param price: money between 5.00 and 600.00
param restocking: money = 2.00

account world    "world" external
account escrow   "orders:{agreement}:held"
account merchant "merchant:revenue"
account customer "customers:{customer}:card"

state ordered initial
state paid
state kept final
state returned final

clause "1" transition pay: ordered -> paid {
  by customer
  transfer price from world to escrow
}

clause "2" transition keep: paid -> kept {
  by clerk
  transfer price from escrow to merchant
}

clause "3" transition return_item: paid -> returned {
  by clerk
  transfer price - restocking from escrow to customer
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
