# FIXED twin of escrow_silent_buyer.bug.pact: `expire` leaves from `funded`
# and `disputed`, so the clock closes every funded escrow once the window passes.
pact "planted.escrow_silent_buyer" version "1.0.1"

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

transition expire: funded, disputed -> refunded {
  by timer
  when now >= funded_at + window
  transfer balance(escrow) from escrow to world
}

invariant escrow_never_negative: balance(escrow) >= 0

property funded_is_closed: reached(funded) leads_to final
