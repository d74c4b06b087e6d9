# PLANTED BUG: the scheduler releases money out of a dispute.
# `auto_release` was meant to pay the seller when the buyer stays silent for
# the review window, but its source list also names `disputed`, so once the
# window passes the scheduler settles a disputed order before the arbiter
# rules. A reviewer should see: fund, deliver, dispute, time passes 7d,
# auto_release; `disputes_settled_by_arbiter` violated.
# Fix: `auto_release` leaves only from `delivered`.
pact "planted.auto_release_from_dispute" version "1.0.0"

currency EUR scale 2

role buyer
role seller
role arbiter
clock scheduler

param price: money between 1.00 and 5000.00
param fee: percent = 5%
param review_window: duration = 7d

account world    "world" external
account escrow   "escrow:{agreement}"
account seller   "sellers:{seller}:payable"
account platform "platform:fees"
account buyer    "buyers:{buyer}:refunds"

state draft initial
state funded
state delivered
state disputed
state released final
state refunded final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition deliver: funded -> delivered {
  by seller
  stamp delivered_at
}

clause "3" transition accept: delivered -> released {
  by buyer
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "4" transition auto_release: delivered, disputed -> released {
  by scheduler
  when now >= delivered_at + review_window
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "5" transition dispute: delivered -> disputed {
  by buyer
  when now < delivered_at + review_window
}

clause "6.1" transition rule_for_buyer: disputed -> refunded {
  by arbiter
  transfer price from escrow to buyer
}

clause "6.2" transition rule_for_seller: disputed -> released {
  by arbiter
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "7.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "7.2" invariant disputes_settled_by_arbiter:
  reached(disputed) implies applied(auto_release) == 0
