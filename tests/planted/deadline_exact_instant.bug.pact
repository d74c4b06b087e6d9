# PLANTED BUG: a deadline off by one at the exact instant.
# The buyer may cancel "within the cooling-off period" and the seller may ship
# "once the cooling-off period is over". `cancel` says `now <=` and `ship` says
# `now >=`, so at the exact instant `paid_at + cooling_off` both are enabled:
# the seller ships, then the buyer cancels the shipped order and is refunded.
# A reviewer should see: pay, time passes exactly 14d, ship, cancel;
# `shipped_is_never_cancelled` violated. Fix: `cancel` uses `now <`.
pact "planted.deadline_exact_instant" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 2000.00
param cooling_off: duration = 14d

account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"
account buyer  "buyers:{buyer}:refunds"

state placed initial
state paid
state shipped
state settled final
state cancelled final

clause "1" transition pay: placed -> paid {
  by buyer
  stamp paid_at
  transfer price from world to escrow
}

clause "2" transition cancel: paid, shipped -> cancelled {
  by buyer
  when now <= paid_at + cooling_off
  transfer price from escrow to buyer
}

clause "3" transition ship: paid -> shipped {
  by seller
  when now >= paid_at + cooling_off
}

clause "4" transition settle: shipped -> settled {
  by buyer, seller
  transfer price from escrow to seller
}

clause "5.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "5.2" invariant shipped_is_never_cancelled: reached(shipped) implies not reached(cancelled)
