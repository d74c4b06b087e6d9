# PLANTED BUG: a second path settles the same order.
# After `release` the order waits in `released` for the buyer's rating.
# `auto_close` was added to close orders nobody rates, but it was written as
# a copy of an auto-release: its source list includes `released` and it
# still carries the transfer. A reviewer should see: fund, deliver, release,
# time passes 10d, auto_close; the escrow is paid out twice
# (`settles_once`, `escrow_never_negative`, built-in `no_negative_internal`).
# Fix: `auto_close` leaves only from `delivered`, and a separate clause
# closes unrated released orders without moving money.
pact "planted.second_terminal_path" version "1.0.0"

currency EUR scale 2

role buyer
role seller
clock scheduler

param price: money between 1.00 and 3000.00
param fee: percent = 8%
param close_after: duration = 10d

account world    "world" external
account escrow   "escrow:{agreement}"
account seller   "sellers:{seller}:payable"
account platform "platform:fees"

state draft initial
state funded
state delivered
state released
state closed final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition deliver: funded -> delivered {
  by seller
  stamp delivered_at
}

clause "3" transition release: delivered -> released {
  by buyer
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "4" transition rate: released -> closed {
  by buyer
}

clause "5" transition auto_close: delivered, released -> closed {
  by scheduler
  when now >= delivered_at + close_after
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "6.1" invariant escrow_never_negative: balance(escrow) >= 0
clause "6.2" invariant settles_once: applied(release) + applied(auto_close) <= 1
