# PLANTED BUG: one cancel clause for two states that need different postings.
# `cancel` leaves from `placed` and from `paid` and always refunds the price
# from escrow, so cancelling an order that was never paid "refunds" money
# the escrow never received. A reviewer should see: a single event, cancel
# from `placed`; escrow at -1.00 (`escrow_never_negative`,
# `escrow_empty_when_final`, built-in `no_negative_internal`).
# Fix: two clauses, `cancel_unpaid` with no transfer and `cancel_paid` with
# the refund.
pact "planted.cancel_unpaid_refund" version "1.0.0"

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

clause "3" transition cancel: placed, paid -> cancelled {
  by buyer, support
  transfer price from escrow to buyer
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
