# PLANTED BUG: a full refund after part of the escrow was already paid out.
# Shipping pays the courier its fee out of the order's escrow. The refund
# for a lost parcel still returns the full price from escrow, which no
# longer holds it. A reviewer should see: pay, ship (courier 4.90 from
# escrow), refund_lost_parcel (full price); escrow at -4.90
# (`escrow_never_negative`, `escrow_empty_when_final`, built-in
# `no_negative_internal`).
# Fix: refund what the escrow still holds, `price - shipping`
# (the courier fee is the platform's loss to claim from the courier).
pact "planted.courier_paid_refund" version "1.0.0"

currency EUR scale 2

role buyer
role seller
role support

param price: money between 10.00 and 900.00
param shipping: money = 4.90

account world   "world" external
account escrow  "escrow:{agreement}"
account courier "couriers:payable"
account seller  "sellers:{seller}:payable"
account buyer   "buyers:{buyer}:refunds"

state placed initial
state paid
state shipped
state delivered final
state refunded final

clause "1" transition pay: placed -> paid {
  by buyer
  transfer price from world to escrow
}

clause "2" transition ship: paid -> shipped {
  by seller
  transfer shipping from escrow to courier
}

clause "3" transition deliver: shipped -> delivered {
  by buyer
  transfer price - shipping from escrow to seller
}

clause "4" transition refund_lost_parcel: shipped -> refunded {
  by support
  transfer price from escrow to buyer
}

clause "5.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "5.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
