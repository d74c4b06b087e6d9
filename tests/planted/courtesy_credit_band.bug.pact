# PLANTED BUG: a courtesy credit for a narrow band of order values, taken
# from the order's escrow.
# Orders from 45.00 to 49.99 just miss free shipping (50.00), so support
# added a courtesy credit of the 4.90 shipping fee, paid to the buyer when the
# order ships. The credit leaves the escrow, so the escrow no longer holds the
# price the seller is released later. The band is 500 of the 99,901 prices in
# range, and none of the usual sample prices falls in it.
# A reviewer should see: fund at a price in 45.00 .. 49.99, ship with the
# credit; `release` is then enabled but the ledger refuses it (escrow holds
# price - 4.90): built-in `funds_available`, with `release` as the refused
# command. Fix: the credit comes from the external promotions budget.
pact "planted.courtesy_credit_band" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 1000.00
param shipping: money = 4.90

account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"
account buyer  "buyers:{buyer}:wallet"

state open initial
state funded
state shipped
state released final
state returned final

clause "1" transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2.1" transition ship: funded -> shipped {
  by seller
  when price < 45.00 or price >= 50.00
}

clause "2.2" transition ship_with_credit: funded -> shipped {
  by seller
  when price >= 45.00 and price < 50.00
  transfer shipping from escrow to buyer
}

clause "3" transition release: shipped -> released {
  by buyer
  transfer price from escrow to seller
}

clause "4" transition return_item: shipped -> returned {
  by buyer
  transfer balance(escrow) from escrow to buyer
}

clause "5" invariant escrow_empty_when_final: final implies balance(escrow) == 0
