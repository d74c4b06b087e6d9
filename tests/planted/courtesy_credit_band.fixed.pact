# FIXED twin of courtesy_credit_band.bug.pact: the courtesy credit for orders
# from 45.00 to 49.99 is paid from the external promotions budget, so the
# escrow still holds the whole price when the seller is released.
pact "planted.courtesy_credit_band" version "1.0.1"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 1000.00
param shipping: money = 4.90

account world      "world" external
account promotions "platform:promotions" external
account escrow     "escrow:{agreement}"
account seller     "sellers:{seller}:payable"
account buyer      "buyers:{buyer}:wallet"

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
  transfer shipping from promotions to buyer
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
