# PLANTED BUG: a release guard that a partial refund makes false for good.
# Support may refund the shipping cost (1.00 to 5.00) before the order is
# released. The release is guarded by `balance(escrow) == price`, meant as
# "the order is fully funded"; after the partial refund the escrow holds
# less than the price, so the order can never be released and what is left
# stays in escrow, with no transition that can move it.
# A reviewer should see: fund, refund_shipping; no command can ever commit
# again while the escrow holds price - partial (built-in `funds_not_stuck`).
# Fix: release whatever the escrow holds, `transfer balance(escrow)`.
pact "planted.stuck_after_partial_refund" version "1.0.0"

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
  when balance(escrow) == price
  transfer price from escrow to seller
}

clause "4" invariant escrow_empty_when_final: final implies balance(escrow) == 0
