# PLANTED BUG: a seller payout below the payout minimum.
# The platform takes a flat fee (20.00 to 30.00, agreed per seller) out of
# the price on release, and the payout provider refuses payouts under 1.00,
# so the policy promises that a released seller gets at least 1.00. The
# release guard only checks that the price is above the fee: when the price
# exceeds the fee by less than 1.00 (a band 0.99 wide in the difference of
# two ranged params) the seller is released a few cents. No pair of sample
# values lands in that band.
# A reviewer should see: fund, deliver, release with 0.00 < price - fee <
# 1.00 (for example price 20.01, fee 20.00); the seller gets less than 1.00
# (`seller_payout_at_least_minimum`). Fix: release only when
# `price - fee >= 1.00`, and refund otherwise.
pact "planted.payout_below_minimum" version "1.0.0"

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

clause "5.1" invariant seller_payout_at_least_minimum: reached(released) implies balance(seller) >= 1.00
clause "5.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
