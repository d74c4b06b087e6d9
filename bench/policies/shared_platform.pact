# Benchmark model: escrowed orders that share the platform fee account, with a
# payout notification that the provider may lose. Several agreements and a
# fault budget make the state space grow quickly.
pact "bench.shared_platform" version "1.0.0"

currency EUR scale 2
default deny

role buyer
role seller

param price: money between 1.00 and 100.00
param fee: percent = 10%
param order_id: text matching "O-[0-9]{1,9}"

account world    "world" external
account escrow   "escrow:{agreement}"
account platform "platform:fees"
account seller   "sellers:{seller}:payable"
account buyer    "buyers:{buyer}:refunds"

rule R2 allow

effect notify_payout {
  risk R2
  reversibility not_applicable
  max_calls 1
  strategy reconcilable
  key order_id
}

state draft initial
state funded
state released final
state refunded final

clause "1" transition fund: draft -> funded {
  by buyer
  transfer price from world to escrow
}

clause "2" transition release: funded -> released {
  by buyer
  call notify_payout
  transfer price from escrow {
    fee to platform
    remaining to seller
  }
}

clause "3" transition refund: funded -> refunded {
  by seller
  transfer price from escrow to buyer
}

clause "4" invariant escrow_never_negative: balance(escrow) >= 0
clause "5" invariant notified_once: applied(notify_payout) <= 1
