# FIXED twin of courier_paid_refund.bug.pact: the refund returns what the
# escrow still holds, the price less the courier fee already paid out.
pact "planted.courier_paid_refund" version "1.0.1"

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
  transfer price - shipping from escrow to buyer
}

clause "5.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "5.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
