# FIXED twin of deadline_exact_instant.bug.pact: the cooling-off period is
# half-open. `cancel` needs `now < paid_at + cooling_off` and `ship` needs
# `now >= paid_at + cooling_off`, so exactly one of them is enabled at every
# instant and a shipped order can no longer be cancelled.
pact "planted.deadline_exact_instant" version "1.0.1"

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
  when now < paid_at + cooling_off
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
