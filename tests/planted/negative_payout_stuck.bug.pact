# PLANTED BUG: a seller payout that is negative for cheap orders, guarded
# but with nowhere else to go.
# On settlement the platform keeps a fixed fee of 3.00, the courier is paid
# its rate (0.00 to 15.00, per route) and the seller gets the rest,
# `price - fixed_fee - courier`. Prices start at 5.00, so for a cheap order
# on an expensive route that share is negative. The author guarded `settle`
# so the ledger never sees a negative payout, but gave such an order no
# other way out: it is funded and then stuck, its price in escrow for good.
# A reviewer should see: fund at a price below fixed_fee + courier (for
# example price 5.00, courier 15.00); no command can ever commit again while
# the escrow holds the price (built-in `funds_not_stuck`).
# Fix: an order that cannot cover its costs is cancelled and refunded.
pact "planted.negative_payout_stuck" version "1.0.0"

currency EUR scale 2

role buyer
role platform_ops

param price: money between 5.00 and 200.00
param fixed_fee: money = 3.00
param courier: money between 0.00 and 15.00

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account carrier  "carriers:shipping"
account seller   "sellers:{agreement}:payable"

state open initial
state funded
state settled final

clause "1" transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition settle: funded -> settled {
  by platform_ops
  when price - fixed_fee - courier >= 0
  transfer fixed_fee from escrow to platform
  transfer courier from escrow to carrier
  transfer price - fixed_fee - courier from escrow to seller
}

clause "3" invariant escrow_empty_when_final: final implies balance(escrow) == 0
