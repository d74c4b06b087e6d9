# FIXED twin of nested_fee_leaves_seller_nothing.bug.pact: the smallest allowed
# price (5.00) leaves 2.50 after the fixed fee, so the seller's 90% of it is
# at least 2.25 and rounding never takes the seller's last cent.
pact "planted.nested_fee_leaves_seller_nothing" version "1.0.1"

currency EUR scale 2

role buyer
role seller

param price: money between 5.00 and 500.00
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
