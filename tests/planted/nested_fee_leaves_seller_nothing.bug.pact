# PLANTED BUG: a fixed fee plus a percent (a nested split) can leave the
# seller nothing although every price is above the fixed fee.
# The platform takes a fixed 2.50 first, then 10% of what is left, and the
# seller the rest. Prices start at 2.51, one cent above the fee, but on one
# cent the percent rounds down to 0 for both portions and the unit left over
# goes, as Numscript hands it out, to the first portion: the platform.
# A reviewer should see: fund, deliver, release at price 2.51 with seller 0.00;
# `seller_paid_on_release` violated. Fix: prices start at 5.00.
pact "planted.nested_fee_leaves_seller_nothing" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 2.51 and 500.00
param fee: money = 2.50

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account seller   "sellers:{seller}:payable"

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
  transfer price from escrow {
    fee to platform
    remaining to {
      10% to platform
      remaining to seller
    }
  }
}

clause "4.1" invariant escrow_empty_when_final: final implies balance(escrow) == 0
clause "4.2" invariant seller_paid_on_release: reached(released) implies balance(seller) > 0
