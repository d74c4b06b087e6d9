# PLANTED BUG: a funded escrow waits forever for a buyer who never answers.
# `expire` was meant to return the money once the window passes whether or not
# the buyer disputed, but its source list names only `disputed`: from
# `funded`, only the buyer can move the agreement, and nobody is obliged to.
# A reviewer should see: fund, then a run that stays in `funded` (stuttering,
# only `confirm` and `dispute` by the buyer enabled); `funded_is_closed` violated.
# Fix: `expire` leaves from `funded` too.
pact "planted.escrow_silent_buyer" version "1.0.0"

currency EUR scale 2
default deny

role buyer
clock timer

param price: money = 25.00
param window: duration = 14d

account world "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{agreement}"

state placed initial
state funded
state disputed
state settled final
state refunded final

transition fund: placed -> funded {
  by buyer
  stamp funded_at
  transfer price from world to escrow
}

transition confirm: funded -> settled {
  by buyer
  transfer balance(escrow) from escrow to seller
}

transition dispute: funded -> disputed {
  by buyer
}

transition expire: disputed -> refunded {
  by timer
  when now >= funded_at + window
  transfer balance(escrow) from escrow to world
}

invariant escrow_never_negative: balance(escrow) >= 0

property funded_is_closed: reached(funded) leads_to final
