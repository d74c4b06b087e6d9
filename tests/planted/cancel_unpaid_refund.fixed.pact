# FIXED twin of cancel_unpaid_refund.bug.pact: an unpaid order is cancelled
# without a transfer; only a paid one is refunded from escrow.
pact "planted.cancel_unpaid_refund" version "1.0.1"

currency EUR scale 2

role buyer
role support

param price: money between 1.00 and 700.00

account world  "world" external
account escrow "escrow:{agreement}"
account shop   "shop:revenue"
account buyer  "buyers:{buyer}:refunds"

state placed initial
state paid
state fulfilled final
state cancelled final

clause "1" transition pay: placed -> paid {
  by buyer
  transfer price from world to escrow
}

clause "2" transition fulfil: paid -> fulfilled {
  by support
  transfer price from escrow to shop
}

clause "3.1" transition cancel_unpaid: placed -> cancelled {
  by buyer, support
}

clause "3.2" transition cancel_paid: paid -> cancelled {
  by buyer, support
  transfer price from escrow to buyer
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
