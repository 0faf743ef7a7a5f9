-- Argo CD health of an object charter reconciles (kyverno.io ClusterPolicy
-- and Policy, gitops.charter.dev PolicyRepository), read from the status
-- conditions charter writes: Ready (with observedGeneration), Reconciling
-- and Stalled. One script serves the three kinds: they share those
-- conditions, and only a PolicyRepository has spec.suspend.
--
-- Healthy only when charter says Ready=True for the generation Argo CD
-- applied: a spec charter has not seen yet is never shown as in force.
-- Ready=False is Degraded even while a retry is pending (Reconciling=True):
-- what Git declares is not in force, and the message says why (e.g.
-- reason Unsupported: the fields charter cannot enforce).
local hs = {}

local function find(conditions, type)
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

-- "Reason: message", leaving out whichever is empty.
local function describe(c)
  local reason, message = c.reason or "", c.message or ""
  if reason ~= "" and message ~= "" then
    return reason .. ": " .. message
  end
  return reason .. message
end

if obj.spec ~= nil and obj.spec.suspend == true then
  hs.status = "Suspended"
  hs.message = "suspended: charter fetches and applies nothing until spec.suspend is false"
  return hs
end

local conditions = {}
if obj.status ~= nil and obj.status.conditions ~= nil then
  conditions = obj.status.conditions
end
local generation = obj.metadata.generation

local ready = find(conditions, "Ready")
if ready == nil then
  hs.status = "Progressing"
  hs.message = "waiting for charter to report the Ready condition"
  return hs
end
if ready.observedGeneration == nil or ready.observedGeneration ~= generation then
  hs.status = "Progressing"
  hs.message = "waiting for charter to observe generation " .. tostring(generation) ..
    " (Ready is for generation " .. tostring(ready.observedGeneration) .. ")"
  return hs
end

local stalled = find(conditions, "Stalled")
if ready.status == "False" then
  hs.status = "Degraded"
  hs.message = describe(ready)
  return hs
end
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

local reconciling = find(conditions, "Reconciling")
if reconciling ~= nil and reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = describe(reconciling)
  return hs
end

if ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end

hs.status = "Progressing"
hs.message = describe(ready)
return hs
