# PLANTED BUG: a promotion for one exact amount, paid out of escrow.
# Marketing runs a "pay 19.99, get 2.00 back" offer: an order of exactly
# 19.99 gets a 2.00 cashback when it is released. The cashback is taken from
# the order's escrow, which holds only the price, and the price all goes to
# the seller. Only one value in the whole range enables `release_promo`, so
# a search over a few sample prices never fires it.
# A reviewer should see: fund at price 19.99; `release_promo` is enabled
# there but the ledger refuses it (escrow would end at -2.00): built-in
# `funds_available`, with `release_promo` as the refused command.
# Fix: the cashback comes from the external promotions budget.
pact "planted.promo_exact_amount" version "1.0.0"

currency EUR scale 2

role buyer
role seller

param price: money between 1.00 and 500.00

account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"
account buyer  "buyers:{buyer}:wallet"

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
  transfer 2.00 from escrow to buyer
}

clause "4" transition cancel: funded -> cancelled {
  by seller
  transfer price from escrow to buyer
}

clause "5" invariant escrow_empty_when_final: final implies balance(escrow) == 0
