# PLANTED BUG: a fixed fee larger than the smallest allowed price.
# The platform takes a fixed 2.50 first (`fee to platform`, capped by what is
# left) and the seller gets the remainder, but prices start at 1.00: for any
# price up to 2.50 the whole price is the fee and the seller is paid nothing.
# A reviewer should see: fund, deliver, release at price 1.00 with seller 0.00;
# `seller_paid_on_release` violated. Fix: prices start above the fee (5.00).
pact "planted.fixed_fee_exceeds_price" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 500.00
param fee: money = 2.50

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account seller   "sellers:{seller}:payable"

state draft initial
state funded
state delivered
state released final
state cancelled final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition cancel: draft -> cancelled {
  by buyer
}

clause "3" transition deliver: funded -> delivered {
  by seller
}

clause "4" transition release: delivered -> released {
  by buyer
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "5.1" invariant escrow_empty_when_final: final implies balance(escrow) == 0
clause "5.2" invariant seller_paid_on_release: reached(released) implies balance(seller) > 0
