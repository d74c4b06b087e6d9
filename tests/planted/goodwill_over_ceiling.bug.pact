# PLANTED BUG: an effect amount that leaves out part of what it credits.
# Support settles a complaint by crediting the customer's card with a refund
# (up to 80.00, from the merchant) and a goodwill gesture (up to 30.00, from
# the marketing budget) in one provider call. The card provider refuses
# credits above 100.00 per case, and `credit_card` has that `ceiling`; but
# the call declares only the refund as its amount, so the ceiling never sees
# the goodwill and a case can credit 110.00.
# A reviewer should see: make_good with refund + goodwill above 100.00; the
# customer is credited more than 100.00 (`credit_within_limit`).
# Fix: the call carries `refund + goodwill`, so the ceiling refuses such a
# case (support can still close it).
pact "planted.goodwill_over_ceiling" version "1.0.0"

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
  consequence "the card of ticket {ticket} will be credited {refund}."
}

state open initial
state resolved final
state closed final

clause "1" transition make_good: open -> resolved {
  by support
  call credit_card amount refund
  transfer refund from merchant to customer
  transfer goodwill from marketing to customer
}

clause "2" transition close: open -> closed {
  by support
}

clause "3" invariant credit_within_limit: balance(customer) <= 100.00
