# PLANTED BUG: a refund paid out of the wrong account.
# The refund clause names `platform` (the platform's fee account) as its
# source instead of the order's escrow: the platform's internal account goes
# negative and the buyer's money stays in escrow after the order is closed.
# A reviewer should see: fund, refund; built-in `no_negative_internal`
# (platform -1.00) and `escrow_empty_when_final` violated.
# Fix: `transfer price from escrow to buyer`.
pact "planted.refund_from_wrong_account" version "1.0.0"

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
  transfer price from platform to buyer
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
