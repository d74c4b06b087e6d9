# FIXED twin of refund_after_settlement.bug.pact: a refund is possible only
# while the money is still in escrow (`paid`); a settled order is archived.
pact "planted.refund_after_settlement" version "1.0.1"

currency USD scale 2

role buyer
role support
role seller

param price: money between 0.50 and 800.00

account world  "world" external
account escrow "escrow:{agreement}"
account seller "sellers:{seller}:payable"
account buyer  "customers:{buyer}:card"

state placed initial
state paid
state settled
state archived final
state refunded final

clause "1" transition pay: placed -> paid {
  by buyer
  transfer price from world to escrow
}

clause "2" transition settle: paid -> settled {
  by seller
  transfer price from escrow to seller
}

clause "3" transition archive: settled -> archived {
  by support
}

clause "4" transition refund: paid -> refunded {
  by support
  transfer price from escrow to buyer
}

clause "5.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "5.2" invariant paid_out_once: applied(settle) + applied(refund) <= 1
