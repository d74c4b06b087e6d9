# FIXED twin of refund_from_wrong_account.bug.pact: the refund comes out of
# the order's escrow.
pact "planted.refund_from_wrong_account" version "1.0.1"

currency EUR scale 2

role buyer
role seller
role support

param price: money between 1.00 and 1500.00
param fee: percent = 12%

account world    "world" external
account escrow   "escrow:{agreement}"
account seller   "sellers:{seller}:payable"
account platform "platform:fees"
account buyer    "buyers:{buyer}:refunds"

state draft initial
state funded
state released final
state refunded final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition release: funded -> released {
  by buyer
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "3" transition refund: funded -> refunded {
  by support
  transfer price from escrow to buyer
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
