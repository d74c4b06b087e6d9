# FIXED twin of negative_payout_stuck.bug.pact: an order whose price does not
# cover the fixed fee and the courier is cancelled and refunded to the buyer
# (`cancel_uneconomic`), so every funded order can leave `funded`.
pact "planted.negative_payout_stuck" version "1.0.1"

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
account buyer    "buyers:{buyer}:refunds"

state open initial
state funded
state settled final
state cancelled final

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

clause "2.1" transition cancel_uneconomic: funded -> cancelled {
  by platform_ops
  when price - fixed_fee - courier < 0
  transfer price from escrow to buyer
}

clause "3" invariant escrow_empty_when_final: final implies balance(escrow) == 0
