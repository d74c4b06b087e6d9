# PLANTED BUG: a flat service fee that can equal the price.
# The platform takes a flat fee (20.00 to 30.00, agreed per seller) out of
# the price on release; an order that does not cover the fee is refunded
# instead. The release guard says `price >= fee`, so an order whose price is
# exactly the fee is released with all of it going to the platform and
# nothing to the seller. Only prices equal to the fee show it: a search over
# sample prices and sample fees never pairs two equal values.
# A reviewer should see: fund, deliver, release with price = fee (for
# example 20.00 and 20.00); the seller is released 0.00
# (`seller_paid_on_release`). Fix: release only when `price > fee`, and
# refund when `price <= fee`.
pact "planted.fee_equals_price" version "1.0.0"

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
  when price >= fee
  transfer fee from escrow to platform
  transfer price - fee from escrow to seller
}

clause "4" transition refund_small_order: delivered -> refunded {
  by seller
  when price < fee
  transfer price from escrow to buyer
}

clause "5.1" invariant seller_paid_on_release: reached(released) implies balance(seller) > 0
clause "5.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
