/** `tollgate keys` usage: its own file so that `tollgate --help` loads nothing else. */
export const KEYS_USAGE = `tollgate keys <command> [options]   (needs REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS)

  create --plan P [--name N] [--per-minute X --per-day Y] [--per-month Z] [--max-concurrent C]
         [--billing-anchor DATE] [--expires-at DATE] [--shadow] [--owner O] [--allow-cidr CIDR]... [--scope S]...
                                                            create a key; prints the secret once. --owner:
                                                            the customer it belongs to (scope: owner plans);
                                                            --allow-cidr (repeatable): the only networks it
                                                            may be used from; --scope (repeatable): what it
                                                            may do (services' and routes' requireScopes);
                                                            --billing-anchor 2026-01-31: its month begins on
                                                            the 31st (or a shorter month's last day)
  list [--plan P] [--status active|revoked|expired]         keys, in id order
  show ID                                                   one key
  revoke ID                                                 stop a key at once, on every replica
  set-plan ID PLAN                                          move a key to another plan
  set-quota ID [--per-minute X --per-day Y] [--per-month Z] [--max-concurrent C] [--billing-anchor DATE]
               [--shadow] | --clear                         negotiated quotas that override the plan's;
                                                            --max-concurrent: most requests and tunnels
                                                            in flight together; --shadow: refusals are only
                                                            counted and logged
  set-expiry ID DATE | --clear                              the key stops at DATE (ISO 8601 with a zone)
  set-cidrs ID CIDR... | --clear                            the only networks the key may be used from
  set-scopes ID SCOPE... | --clear                          what the key may do (replaces its scopes)
  rotate ID --grace-seconds S                               a new secret for the same key; prints it once;
                                                            the old one keeps working S more seconds
  unban ID                                                  lift a ban at once, on every replica
  usage ID                                                  every window: used, limit, remaining, reset
  credits show ID                                           the prepaid credit balance (the owner's under scope: owner)
  credits add ID N --reason R                               add N credits (N < 0 takes them away); audited
  credits set ID N --reason R                               set the balance to N; audited; never below zero
  audit [--limit N] [--cursor C]                            admin changes, newest first (API and CLI)

  --json   one JSON document on stdout, for scripts`;
