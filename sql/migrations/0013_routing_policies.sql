-- Each namespace's routing policy (domain.RoutingPolicy), the current
-- version of what ROUTING_POLICY_CHANGED on "policy:routing:<namespace>"
-- records, written in the same transaction. A namespace without a row uses
-- the compiled-in policy (version 0).
CREATE TABLE routing_policies (
    namespace  text        PRIMARY KEY,
    version    integer     NOT NULL CHECK (version > 0),
    policy     jsonb       NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);
