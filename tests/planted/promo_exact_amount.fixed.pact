# FIXED twin of promo_exact_amount.bug.pact: the 2.00 cashback of the 19.99
# promotion is paid from the external promotions budget, so the escrow only
# ever pays out the price it holds.
pact "planted.promo_exact_amount" version "1.0.1"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 500.00

account world      "world" external
account promotions "platform:promotions" external
account escrow     "escrow:{agreement}"
account seller     "sellers:{seller}:payable"
account buyer      "buyers:{buyer}:wallet"

state open initial
state funded
state released final
state cancelled final

clause "1" transition fund: open -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition release: funded -> released {
  by buyer
  when price != 19.99
  transfer price from escrow to seller
}

clause "3" transition release_promo: funded -> released {
  by buyer
  when price == 19.99
  transfer price from escrow to seller
  transfer 2.00 from promotions to buyer
}

clause "4" transition cancel: funded -> cancelled {
  by seller
  transfer price from escrow to buyer
}

clause "5" invariant escrow_empty_when_final: final implies balance(escrow) == 0
