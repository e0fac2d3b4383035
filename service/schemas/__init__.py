"""Every HTTP request and response body of the service, with bounds and examples, by resource:
values.py (the values requests hold, their limits, the base of every request), forecasts.py
(stateless forecasts, and the forecast every answer holds), series.py (stored series),
events.py (the data of the Server-Sent Events), common.py (the model, health, errors)."""
