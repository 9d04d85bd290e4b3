-- Argo CD health of a MaintenanceGate (live.ifo.kubevirt.io), read from its Clear condition.
-- argocd-cm key: resource.customizations.health.live.ifo.kubevirt.io_MaintenanceGate
--
--   Clear=True     Healthy      nothing in flight: what waits on the gate may go on
--   Clear=False    Progressing  operations in flight, named by the gate's message
--   Clear=Unknown  Unknown      the server cannot vouch for the scope (a target it does not
--                               watch, or its first sync): a sync wave keeps waiting, as it
--                               would on Progressing, where Degraded would fail the sync
--   no Clear       Progressing  waiting for the gate
--
-- Argo CD runs it with gopher-lua (Lua 5.1), the gate as the global `obj`, with the base,
-- package and table libraries and part of os only: nothing here may use string or math.
local hs = {}
local conditions = nil
if obj.status ~= nil then
  conditions = obj.status.conditions
end
if conditions ~= nil then
  for _, condition in ipairs(conditions) do
    if condition.type == "Clear" then
      hs.message = condition.message
      if hs.message == nil or hs.message == "" then
        hs.message = condition.reason
      end
      if condition.status == "True" then
        hs.status = "Healthy"
      elseif condition.status == "False" then
        hs.status = "Progressing"
      else
        hs.status = "Unknown"
      end
      return hs
    end
  end
end
hs.status = "Progressing"
hs.message = "waiting for the gate"
return hs
