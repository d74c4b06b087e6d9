# FIXED twin of fee_equals_price.bug.pact: an order is released only when its
# price is above the flat fee; an order whose price does not exceed the fee is
# refunded, so a release always pays the seller something.
pact "planted.fee_equals_price" version "1.0.1"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 100.00
param fee: money between 20.00 and 30.00

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account seller   "sellers:{seller}:payable"
account buyer    "buyers:{buyer}:refunds"

state draft initial
state funded
state delivered
state released final
state refunded final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition deliver: funded -> delivered {
  by seller
}

clause "3" transition release: delivered -> released {
  by buyer
  when price > fee
  transfer fee from escrow to platform
  transfer price - fee from escrow to seller
}

clause "4" transition refund_small_order: delivered -> refunded {
  by seller
  when price <= fee
  transfer price from escrow to buyer
}

clause "5.1" invariant seller_paid_on_release: reached(released) implies balance(seller) > 0
clause "5.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
