# PLANTED BUG: two separately rounded transfers strand a minor unit.
# The release pays the platform `price * fee` and the seller `price * 90%`
# as two transfers. Each product rounds down on its own, so for a price like
# 1.01 the two shares add up to 1.00 and one cent stays in escrow after the
# order is final. A reviewer should see: fund, deliver, release at price
# 1.01; `escrow_empty_when_final` violated with escrow 0.01.
# Fix: one split, `fee to platform`, `remaining to seller`, which allots
# every minor unit.
pact "planted.rounding_stranded_cent" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 4000.00
param fee: percent = 10%

account world    "world" external
account escrow   "escrow:{agreement}"
account seller   "sellers:{seller}:payable"
account platform "platform:fees"

state draft initial
state funded
state delivered
state released final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition deliver: funded -> delivered {
  by seller
}

clause "3" transition release: delivered -> released {
  by buyer
  transfer price * fee from escrow to platform
  transfer price * 90% from escrow to seller
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
