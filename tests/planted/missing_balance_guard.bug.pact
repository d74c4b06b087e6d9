# PLANTED BUG: a missing guard on a balance.
# The seller may draw an advance from escrow once work starts. Price and
# advance are agreed separately and nothing says the advance fits in what the
# buyer put in escrow, so a small order with a large advance overdraws it.
# A reviewer should see: fund at price 10.00, start_work paying an advance
# of 200.00; escrow negative (`escrow_never_negative`, built-in
# `no_negative_internal`). Fix: `start_work` requires
# `balance(escrow) >= advance`.
pact "planted.missing_balance_guard" version "1.0.0"

currency EUR scale 2

role client
role contractor

param price: money between 10.00 and 1000.00
param advance: money between 0.00 and 400.00

account world      "world" external
account escrow     "escrow:{agreement}"
account contractor "contractors:{contractor}:payable"
account client     "clients:{client}:refunds"

state draft initial
state funded
state working
state done final
state cancelled final

clause "1" transition fund: draft -> funded {
  by client
  transfer price from world to escrow
}

clause "2" transition start_work: funded -> working {
  by contractor
  transfer advance from escrow to contractor
}

clause "3" transition complete: working -> done {
  by client
  transfer price - advance from escrow to contractor
}

clause "4" transition cancel: funded -> cancelled {
  by client
  transfer price from escrow to client
}

clause "5.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "5.2" invariant escrow_empty_when_final: final implies balance(escrow) == 0
