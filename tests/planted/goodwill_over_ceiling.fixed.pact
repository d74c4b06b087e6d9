# FIXED twin of goodwill_over_ceiling.bug.pact: the call carries the refund
# and the goodwill together, so the provider's 100.00 ceiling refuses a case
# that would credit more; support closes such a case instead.
pact "planted.goodwill_over_ceiling" version "1.0.1"

currency EUR scale 2
default deny

role support

param refund: money between 0.00 and 80.00
param goodwill: money between 0.00 and 30.00
param ticket: text matching "T-[0-9]{1,8}"

account merchant  "merchant:refunds" external
account marketing "marketing:goodwill" external
account customer  "customers:{ticket}:card"

rule R2 allow

effect credit_card {
  risk R2
  reversibility reversible
  scopes "cards:credit"
  egress POST "https://cards.example.com/v2/credits"
  timeout 10s
  ceiling 100.00
  strategy idempotent
  key ticket
  consequence "the card of ticket {ticket} will be credited {refund} and {goodwill}."
}

state open initial
state resolved final
state closed final

clause "1" transition make_good: open -> resolved {
  by support
  call credit_card amount refund + goodwill
  transfer refund from merchant to customer
  transfer goodwill from marketing to customer
}

clause "2" transition close: open -> closed {
  by support
}

clause "3" invariant credit_within_limit: balance(customer) <= 100.00
