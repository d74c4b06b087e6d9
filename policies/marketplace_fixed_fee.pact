# A marketplace order with a fixed platform fee and a courier share.
# Fixed amounts in a split are taken in order, each capped by what is left;
# `remaining` takes the rest.
pact "marketplace.fixed_fee" version "1.2.0"

currency EUR scale 2

role buyer
role seller
role support
clock scheduler

param price: money between 5.00 and 2000.00
param fee: money = 1.50
param courier_fee: money = 3.00
param pickup_window: duration = 2d

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account courier  "couriers:payable"
account seller   "sellers:{seller}:payable"
account buyer    "buyers:{buyer}:refunds"

state placed initial
state paid
state shipped
state settled final
state cancelled final

clause "1.1" transition pay: placed -> paid {
  by buyer
  stamp paid_at
  transfer price from world to escrow
}

clause "1.2" transition cancel_unpaid: placed -> cancelled {
  by buyer, support
}

clause "2.1" transition ship: paid -> shipped {
  by seller
  when now < paid_at + pickup_window
}

clause "2.2" transition expire: paid -> cancelled {
  by scheduler
  when now >= paid_at + pickup_window
  transfer price from escrow to buyer
}

clause "3.1" transition settle: shipped -> settled {
  by buyer, scheduler
  transfer price from escrow {
    fee to platform
    courier_fee to courier
    remaining to seller
  }
}

clause "4.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "4.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
clause "4.3" invariant settles_once: applied(settle) + applied(expire) <= 1
clause "4.4" invariant platform_fee_bounded: balance(platform) <= 1.50
