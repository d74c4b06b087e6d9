# FIXED twin of rounding_stranded_cent.bug.pact: one split allots every
# minor unit, the leftover of the rounding going to the first portion.
pact "planted.rounding_stranded_cent" version "1.0.1"

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
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
