# FIXED twin of prepaid_lifetime_load.bug.pact: a load is accepted only if
# the lifetime total stays within 350.00 after it, so at most 35 loads
# happen. The state space is finite but 71 commands deep (35 loads, 35
# withdrawals, close): it is exhausted with `--max-depth 100`, not with the
# default 64.
pact "planted.prepaid_lifetime_load" version "1.0.1"

currency EUR scale 2

role holder

param load: money = 10.00

account world "world" external
account bank  "banks:{holder}" external
account card  "cards:{agreement}"

state active initial
state closed final

clause "1" transition load: active -> active {
  by holder
  when balance(card) + load <= 20.00 and balance(world) - load >= -350.00
  transfer load from world to card
}

clause "2" transition withdraw: active -> active {
  by holder
  when balance(card) >= load
  transfer load from card to bank
}

clause "3" transition close: active -> closed {
  by holder
  transfer balance(card) from card to bank
}

clause "4.1" invariant lifetime_load_limit: balance(world) >= -350.00
clause "4.2" invariant card_empty_when_closed: final implies balance(card) == 0
