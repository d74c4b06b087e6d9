# FIXED twin of stuck_after_partial_refund.bug.pact: the release pays the
# seller what the escrow holds, after a shipping refund or without one, so
# the order can always be settled.
pact "planted.stuck_after_partial_refund" version "1.0.1"

currency EUR scale 2

role buyer
role seller
role support

param price: money between 10.00 and 1000.00
param partial: money between 1.00 and 5.00

account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"
account buyer  "buyers:{buyer}:refunds"

state open initial
state funded
state adjusted
state released final

clause "1" transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition refund_shipping: funded -> adjusted {
  by support
  transfer partial from escrow to buyer
}

clause "3" transition release: funded, adjusted -> released {
  by buyer
  transfer balance(escrow) from escrow to seller
}

clause "4" invariant escrow_empty_when_final: final implies balance(escrow) == 0
