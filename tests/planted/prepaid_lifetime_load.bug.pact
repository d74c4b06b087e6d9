# PLANTED BUG: a lifetime load limit checked before the load is added.
# An anonymous prepaid card may hold at most 20.00 and, by the card
# scheme's anti-money-laundering rule, be loaded with at most 350.00 over its
# lifetime (what `world` has paid in). Loads are 10.00 each and the holder
# may withdraw to the bank in between. The `load` guard adds the load to the
# card balance before comparing, but compares the lifetime total as it was
# before the load, so a 36th load is accepted at 350.00 and takes the
# total to 360.00. Because the card holds two loads at most, the 36 loads
# need 34 withdrawals in between: 70 commands, past the default search
# depth of 64.
# A reviewer should see: load, load, then withdraw and load 34 times; the
# 36th load breaks `lifetime_load_limit`. With the default depth the search
# stops first and the verdict is incomplete, naming the `load`/`withdraw`
# cycle; `--max-depth 100` finds the violation (and exhausts the space).
# Fix: compare the total after the load, `balance(world) - load >= -350.00`.
pact "planted.prepaid_lifetime_load" version "1.0.0"

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
  when balance(card) + load <= 20.00 and balance(world) >= -350.00
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
